!> melissa_trainer_mpi: mt_start_mpi, the MPI start of a Fortran client: what
!> mt_client_start_mpi (melissa_trainer_mpi.h) does for C, with the same checks and
!> messages. Built only where an MPI with the mpi_f08 module is found; link
!> MelissaTrainer::fortran_mpi.
!>
!>     call mt_declare_field(client, 'u', MT_FLOAT64, [nx, ny])
!>     call mt_declare_part_count(client, 'u', int(nx, c_int64_t) * my_columns)
!>     call mt_start_mpi(client, MPI_COMM_WORLD)     ! type(MPI_Comm) or an integer handle
!>
!> Collective over `comm` (every rank calls it, after declaring the same fields in the
!> same order). It sets the client's rank and size from `comm` (mt_set_rank), computes
!> each field's part offset from the counts declared with mt_declare_part_count by an
!> exclusive scan in rank order (MPI_Exscan; a part declared with mt_declare_part keeps
!> its offset and takes part in the check), checks with MPI_Allreduce that the parts add
!> up to every field's global size, and then starts the client (mt_start; not
!> collective). If any rank's declaration is wrong, every rank gets MT_EMPI, with a
!> message naming the field, before anything is connected; ranks that declared
!> different fields (names, order, dtypes, global shapes, or a different number of
!> fields: their count and a hash of them compared in a first MPI_Allreduce of 4
!> numbers, before the scans) each get MT_EMPI naming their own declaration
!> (mt_fields_differ). That first reduction is polled (`joined`): a rank whose peers have
!> not all called mt_start_mpi within the rendezvous timeout (at least 10 s) gets
!> MT_EMPI naming the fix (every rank on mt_start_mpi; or the plain mt_start on the one
!> rank that streams alone), where it waited for ever.
module melissa_trainer_mpi
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_size_t, c_ptr, c_double
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_c, only: f_string, mt_set_rank_c, mt_field_count_c, mt_field_name_c, &
                               mt_field_size_c, mt_field_part_count_c, mt_set_part_offset_c, &
                               mt_client_start_c, mt_client_error_c, mt_fields_mark_c, &
                               mt_fields_differ_c
  implicit none
  private
  public :: mt_start_mpi

  interface mt_start_mpi
    module procedure start_f08, start_handle
  end interface

  interface
    function mt_mpi_join_timeout_c(c) bind(C, name="mt_mpi_join_timeout") result(bound)
      import :: c_ptr, c_double
      type(c_ptr), value :: c
      real(c_double) :: bound
    end function
    subroutine mt_mpi_join_pause_c() bind(C, name="mt_mpi_join_pause")
    end subroutine
    function mt_mpi_never_joined_c(c, rank, ranks, waited_s, fortran) &
        bind(C, name="mt_mpi_never_joined") result(status)
      import :: c_ptr, c_int, c_double
      type(c_ptr), value :: c
      integer(c_int), value :: rank, ranks, fortran
      real(c_double), value :: waited_s
      integer(c_int) :: status
    end function
  end interface

contains

  !> The first collective of the start: extremes = the MPI_MAX of every rank's counts,
  !> by an MPI_Iallreduce polled (MPI_Test, a 1 ms pause between two) until the bound
  !> mt_mpi_join_timeout (the rendezvous timeout, at least 10 s), as the C header's
  !> mt_mpi_join_: a rank whose peers never call mt_start_mpi (one started with the
  !> plain mt_start) fails with mt_mpi_never_joined's words (MT_EMPI) instead of waiting
  !> for ever. On that failure the request stays pending (a collective cannot be
  !> cancelled) and its buffers allocated (a rank that joins later would write them).
  !> Returns MT_OK, or MT_EMPI: its words in `message` (an MPI call failed) or, where
  !> `message` is unallocated, set on the client (mt_mpi_never_joined).
  integer function joined(client, comm, counts, extremes, rank, ranks, message)
    type(mt_client_t), intent(inout) :: client
    type(MPI_Comm), intent(in) :: comm
    integer(c_int64_t), intent(in) :: counts(4)
    integer(c_int64_t), intent(out) :: extremes(4)
    integer, intent(in) :: rank, ranks
    character(len=:), allocatable, intent(out) :: message  ! (set on an MPI error only)
    integer(c_int64_t), pointer, asynchronous, contiguous :: sent(:), got(:)
    type(MPI_Request) :: request
    logical :: done
    integer :: mpierr
    real(c_double) :: start, bound, waited

    allocate (sent(4), got(4))
    sent = counts
    call MPI_Iallreduce(sent, got, 4, MPI_INTEGER8, MPI_MAX, comm, request, mpierr)
    if (mpierr /= MPI_SUCCESS) then
      deallocate (sent, got)
      message = 'mt_start_mpi: MPI_Iallreduce failed'
      joined = MT_EMPI
      return
    end if
    start = MPI_Wtime()
    bound = mt_mpi_join_timeout_c(client%handle)
    do
      call MPI_Test(request, done, MPI_STATUS_IGNORE, mpierr)
      if (mpierr /= MPI_SUCCESS) then  ! (the buffers kept: the request may be pending)
        message = 'mt_start_mpi: MPI_Test failed'
        joined = MT_EMPI
        return
      end if
      if (done) exit
      waited = MPI_Wtime() - start
      if (waited > bound) then
        joined = int(mt_mpi_never_joined_c(client%handle, int(rank, c_int), &
                     int(ranks, c_int), waited, 1_c_int))
        return
      end if
      call mt_mpi_join_pause_c()
    end do
    extremes = got
    deallocate (sent, got)
    joined = MT_OK
  end function

  !> mt_start_mpi with an integer communicator handle (the `mpi` module's, or mpif.h's).
  subroutine start_handle(client, comm, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(in) :: comm
    integer, intent(out), optional :: ierr
    type(MPI_Comm) :: f08
    f08%MPI_VAL = comm
    call start_f08(client, f08, ierr)
  end subroutine

  subroutine start_f08(client, comm, ierr)
    type(mt_client_t), intent(inout) :: client
    type(MPI_Comm), intent(in) :: comm
    integer, intent(out), optional :: ierr
    character(len=*), parameter :: what = 'mt_start_mpi'
    integer :: rank, ranks, n, i, own, status, wrong, mpierr(4)
    integer(c_int64_t) :: extremes(4), count, mark
    integer(c_int64_t), allocatable :: local(:), offsets(:), totals(:)
    character(len=:), allocatable :: message
    character(len=24) :: a, b

    mpierr = MPI_SUCCESS
    call MPI_Comm_rank(comm, rank, mpierr(1))
    call MPI_Comm_size(comm, ranks, mpierr(2))
    if (any(mpierr(1:2) /= MPI_SUCCESS)) then
      call mt_finish(client, MT_EMPI, what, ierr, &
                     'mt_start_mpi: MPI_Comm_rank/MPI_Comm_size failed')
      return
    end if
    ! Every rank must declare the same fields (a hash of their names, order, dtypes and
    ! global shapes: equal largest and smallest), or each rank's HELLO would differ and
    ! the receiver keep one rank's; and as many, or the scans below would pass buffers of
    ! different lengths (MPI aborts the job). The count is compared besides the hash
    ! (which covers it) so that no collision of hashes reaches those scans; either
    ! differing gets the same words, which list each rank's fields (so their number).
    n = int(mt_field_count_c(client%handle))
    mark = mt_fields_mark_c(client%handle)
    status = joined(client, comm, [int(n, c_int64_t), -int(n, c_int64_t), mark, -mark], &
                    extremes, rank, ranks, message)
    if (status /= MT_OK) then
      if (allocated(message)) then
        call mt_finish(client, status, what, ierr, message)
      else
        call mt_finish(client, status, what, ierr)
      end if
      return
    end if
    if (extremes(1) /= -extremes(2) .or. extremes(3) /= -extremes(4)) then
      status = int(mt_fields_differ_c(client%handle, int(rank, c_int), int(ranks, c_int)))
      call mt_finish(client, status, what, ierr)
      return
    end if

    ! local(i): this rank's count of field i (0-based, as the C accessors); local(n): 1
    ! if this rank is at fault, so that the others learn it from the same reduction.
    allocate (local(0:n), offsets(0:n), totals(0:n))
    local = 0
    message = ''
    own = int(mt_set_rank_c(client%handle, int(rank, c_int), int(ranks, c_int)))
    if (own /= MT_OK) message = f_string(mt_client_error_c(client%handle))
    do i = 0, n - 1
      if (own /= MT_OK) exit
      count = 0
      if (mt_field_part_count_c(client%handle, int(i, c_size_t), count) <= 0) then
        write (a, '(i0)') rank
        message = "field '" // field_name(i) // "': rank " // trim(a) // ' declares no ' // &
                  'part (mt_declare_part_count before mt_start_mpi)'
        own = MT_EMPI
      end if
      local(i) = count
    end do
    if (own /= MT_OK) local(n) = 1
    call MPI_Exscan(local, offsets, n + 1, MPI_INTEGER8, MPI_SUM, comm, mpierr(4))
    if (mpierr(4) == MPI_SUCCESS) &
      call MPI_Allreduce(local, totals, n + 1, MPI_INTEGER8, MPI_SUM, comm, mpierr(4))
    if (mpierr(4) /= MPI_SUCCESS) then
      call mt_finish(client, MT_EMPI, what, ierr, &
                     'mt_start_mpi: MPI_Exscan/MPI_Allreduce failed')
      return
    end if
    if (rank == 0) offsets = 0  ! (MPI leaves rank 0's result undefined)

    if (own /= MT_OK) then
      call mt_finish(client, own, what, ierr, message)
      return
    else if (totals(n) /= 0) then
      write (a, '(i0)') totals(n)
      call mt_finish(client, MT_EMPI, what, ierr, 'mt_start_mpi failed its checks on ' // &
                     trim(a) // ' other rank(s); see the error there')
      return
    end if
    message = "the ranks' parts do not add up to the global fields: "
    wrong = 0
    do i = 0, n - 1
      if (totals(i) == mt_field_size_c(client%handle, int(i, c_size_t))) cycle
      write (a, '(i0)') totals(i)
      write (b, '(i0)') mt_field_size_c(client%handle, int(i, c_size_t))
      if (wrong > 0) message = message // ', '
      message = message // "'" // field_name(i) // "' has " // trim(a) // &
                ' elements, expected ' // trim(b)
      wrong = wrong + 1
    end do
    ! which number is which, and where each comes from (as the C header says it)
    if (wrong > 0) message = message // " (has: the sum of the ranks' " // &
        "mt_declare_part_count; expected: the size of the global shape given " // &
        'mt_declare_field): fix the counts, or the shape'
    if (wrong > 0) then
      call mt_finish(client, MT_EMPI, what, ierr, message)
      return
    end if

    status = MT_OK
    do i = 0, n - 1
      count = 0
      if (mt_field_part_count_c(client%handle, int(i, c_size_t), count) == 1) &
        status = int(mt_set_part_offset_c(client%handle, int(i, c_size_t), offsets(i)))
      if (status /= MT_OK) exit
    end do
    if (status == MT_OK) status = int(mt_client_start_c(client%handle))
    call mt_finish(client, status, what, ierr)

  contains

    function field_name(index) result(name)
      integer, intent(in) :: index
      character(len=:), allocatable :: name
      name = f_string(mt_field_name_c(client%handle, int(index, c_size_t)))
    end function
  end subroutine

end module melissa_trainer_mpi
